"""Operations that point a table at data it had before: rollback, repair, and ``recover`` finishing or
undoing what a crash left."""
