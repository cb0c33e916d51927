"""From sources to something callable: the builders (as the official evaluator builds), the checks read from the
sources before any child starts, and the packager of starter kits."""
