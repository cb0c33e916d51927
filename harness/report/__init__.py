"""Reports from traces: the official-style summary and track score, side-by-side comparisons, the leaderboard."""
