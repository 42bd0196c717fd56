"""The figures of the book: the shared style (:mod:`.style`) and one module per
chapter, named after it."""
