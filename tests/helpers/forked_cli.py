"""Real ``bindscope`` processes without paying the imports each time: a fork server for the CLI tests.

A server process imports bindscope's command-line app and the heavy libraries it needs (torch, numpy,
pandas, pyarrow) once, runs nothing, starts no thread, then forks one child per command. Each child is
a real process of its own (its own pid and session, the requested environment, working folder, argv,
exit status and signals), running ``bindscope.cli.main`` exactly as the console script does; it is only
spared the seconds of start-up imports. Libraries that read the environment when they are imported
(huggingface_hub reads ``HF_HOME`` and ``HF_ENDPOINT``, matplotlib its config folder) are not in
:data:`PRELOAD`, so each child imports them under its own environment; a server started with ``preload``
(the model libraries) serves commands whose hub settings are the server's own (tests/conftest.py decides).

The server answers one JSON request a line on its stdin: ``start`` (fork a command; answers its pid),
``wait`` (its exit status, or a time-out) and ``poll``. The test process talks to it through
:class:`ForkServer`; run this module as a script to start a server.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

#: What a command needs that does not depend on the environment: imported once, in the server.
PRELOAD = (
    "numpy",
    "pandas",
    "pyarrow.parquet",
    "pydantic",
    "typer",
    "yaml",
    "torch",
    "torch._dynamo",  # what torch's optimizers import on first use: seconds per command otherwise
    "scipy",
    "sklearn",
    "rich",
    "bindscope.cli",
)
BINDSCOPE = Path(sys.executable).with_name("bindscope")
#: What a server for model commands preloads beyond :data:`PRELOAD`, and the settings huggingface_hub reads from
#: the environment when it is imported: a command may run in such a server only under the server's own values.
MODEL_LIBRARIES = ("sentence_transformers", "open_clip")
HUB_SETTINGS = ("HF_ENDPOINT", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HUB_DISABLE_XET", "HF_HUB_CACHE")


def same_hub_settings(env: dict[str, str], server_env: dict[str, str | None]) -> bool:
    """Whether a command under ``env`` has the hub settings a model server imported under (``server_env``)."""
    return all(env.get(k) == server_env.get(k) for k in HUB_SETTINGS)


# -- the server ------------------------------------------------------------------------------------------------
def _child(request: dict) -> int:
    """In the forked child: become the requested command and run it; its exit status."""
    status = 1
    try:
        os.setsid()  # its own process group, as a command started by a shell: killpg reaches its workers too
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # read TMPDIR again
        os.chdir(request["cwd"])
        stdin = os.open(os.devnull, os.O_RDONLY)
        out = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        for fd, target in ((stdin, 0), (out, 1), (err, 2)):
            os.dup2(fd, target)
            os.close(fd)
        sys.argv = [str(BINDSCOPE), *request["args"]]
        from bindscope.cli import main

        try:
            main(request["args"])
            status = 0
        except SystemExit as exc:
            code = exc.code
            status = code if isinstance(code, int) else (0 if code is None else 1)
    except BaseException:  # a crash is a traceback on stderr and status 1, as in a fresh interpreter
        import traceback

        traceback.print_exc()
        status = 1
    return status


def _exit(status: int) -> None:
    """End the child as an interpreter ends (threads joined, atexit handlers run, output flushed), without
    tearing down the modules it imported: that teardown takes a second with torch loaded."""
    import atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120  # as the interpreter: output it could not write is an error
    os._exit(status)


def _wait(pid: int, timeout: float | None) -> int | None:
    """The exit status of child ``pid`` (negative: killed by that signal), or None when it is still running."""
    if timeout != 0:
        fd = os.pidfd_open(pid)
        try:
            ready, _, _ = select.select([fd], [], [], timeout)
        finally:
            os.close(fd)
        if not ready:
            return None
    done, status = os.waitpid(pid, 0 if timeout != 0 else os.WNOHANG)
    return os.waitstatus_to_exitcode(status) if done else None


def serve(extra: list[str]) -> None:
    """Import :data:`PRELOAD` and ``extra``, then answer requests until stdin closes; children still running
    then are killed."""
    for name in (*PRELOAD, *extra):
        __import__(name)
    children: set[int] = set()
    reply = sys.stdout
    print(json.dumps({"ready": os.getpid()}), file=reply, flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "start":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _exit(_child(request))
            children.add(pid)
            answer: dict = {"pid": pid}
        else:
            status = _wait(request["pid"], 0 if request["op"] == "poll" else request.get("timeout"))
            if status is not None:
                children.discard(request["pid"])
            answer = {"status": status}
        print(json.dumps(answer), file=reply, flush=True)
    for pid in children:
        try:
            os.killpg(pid, 9)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    sys.stdout.flush()
    os._exit(0)  # no teardown of the imported modules: seconds with torch loaded, for nothing


# -- the client ------------------------------------------------------------------------------------------------
@dataclass
class ForkedCommand:
    """One command forked by a :class:`ForkServer`: a Popen-like handle (pid, poll, wait, output)."""

    server: ForkServer
    pid: int
    args: list[str]
    stdout_path: Path
    stderr_path: Path
    returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.request({"op": "poll", "pid": self.pid})["status"]
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.request({"op": "wait", "pid": self.pid, "timeout": timeout})["status"]
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def kill_group(self, signum: int = 9) -> None:
        """Signal the command and every process it started (it leads its own process group)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signum)

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text(errors="surrogateescape")  # a path that is not UTF-8 prints as its bytes

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="surrogateescape")


class ForkServer:
    """A server process (started with ``env``) that forks ``bindscope`` commands on request."""

    def __init__(self, env: dict[str, str], scratch: Path, preload: tuple[str, ...] = ()) -> None:
        """``preload``: modules to import in the server beyond :data:`PRELOAD`; only those whose import does
        not read the environment the tests change, or for commands that do not depend on it."""
        helpers = str(Path(__file__).resolve().parent)
        scratch.mkdir(parents=True, exist_ok=True)
        env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [helpers, env.get("PYTHONPATH", "")]))}
        self.scratch = scratch
        self._count = 0
        self._ready = False
        self._lock = threading.Lock()  # one request at a time: the server answers them in turn
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "forked_cli", *preload],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            cwd=scratch,
            text=True,
            bufsize=1,
        )

    def _wait_ready(self) -> None:
        """The server imports in the background from its start; the first request waits for it."""
        if not self._ready:
            ready = self._answer()
            if "ready" not in ready:
                raise RuntimeError(f"the fork server did not start: {ready}")
            self._ready = True

    def _answer(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork server exited (status {self.proc.wait()})")
        return json.loads(line)

    def request(self, request: dict) -> dict:
        with self._lock:
            self._wait_ready()
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            return self._answer()

    def start(self, args: list[str], env: dict[str, str], cwd: Path | None = None) -> ForkedCommand:
        """Fork ``bindscope ARGS`` under ``env`` in ``cwd``; its output goes to files read after it ends."""
        self._count += 1
        out, err = self.scratch / f"{self._count}.out", self.scratch / f"{self._count}.err"
        request = {
            "op": "start",
            "args": args,
            "env": env,
            "cwd": str(cwd or Path.cwd()),
            "stdout": str(out),
            "stderr": str(err),
        }
        return ForkedCommand(self, self.request(request)["pid"], args, out, err)

    def run(
        self, args: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """Run ``bindscope ARGS`` to its end, as ``subprocess.run(..., capture_output=True, text=True)`` does."""
        command = self.start(args, env, cwd)
        try:
            status = command.wait(timeout)
        except subprocess.TimeoutExpired:
            command.kill_group()
            command.wait()
            raise
        done = subprocess.CompletedProcess([str(BINDSCOPE), *args], status, command.stdout, command.stderr)
        command.stdout_path.unlink()
        command.stderr_path.unlink()
        return done

    def run_with_file_limit(
        self, args: list[str], env: dict[str, str], limit: int, timeout: float = 300
    ) -> subprocess.CompletedProcess:
        """:meth:`run`, with no file the command writes allowed past ``limit`` bytes (EFBIG: a full disk).

        The soft ``RLIMIT_FSIZE`` is set on the server just while it forks and runs the command: the server
        forks only on request, one at a time, so the command inherits the limit as from a ``preexec_fn``,
        and the commands forked later do not. Python ignores SIGXFSZ, so the write fails instead of
        killing the command.
        """
        import resource

        pid = self.proc.pid
        before = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (limit, before[1]))
        try:
            return self.run(args, env, timeout=timeout)
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, before)

    def close(self) -> None:
        if not self._ready:  # never used (or still importing): nothing to wait for
            self.proc.kill()
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    serve(sys.argv[1:])
