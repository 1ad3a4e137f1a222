from bindscope.cli import main

main()
