"""Several results into one: runs compared side by side (:mod:`.runs`), geometry over several embedding
folders with their comparison (:mod:`.geometry`), and intervene results as one paper-style table
(:mod:`.intervene`)."""
