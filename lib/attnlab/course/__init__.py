"""What only the lessons need: the exercise machinery (student versions, stubs, and the checks that
forbid loops or a library shortcut).
"""
