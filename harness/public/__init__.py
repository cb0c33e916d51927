"""Other teams' published GDN solutions, for side-by-side measurement.

Their code never enters this repository: public/entries.json holds facts about each one (repository, commit, path,
build spec, whether it should run on an H200, what its authors reported), generated from the manifest that comes
with the pre-packed JSONs. The sources only ever live in the cache (.cache/public, git-ignored), fetched either from
a folder of pre-packed JSONs (--from) or by cloning each repository at its commit and packing the solution folder.
"""
