# Doxygen input filter for the public headers (docs/Doxyfile.in).  The
# header comments name parameters kernel-doc style, "@now", which Doxygen
# would read as commands (\name, \dir, ... swallow the word).  Turn each
# into \p now: the name in code font, as Doxygen renders parameters.
s/@([A-Za-z_][A-Za-z0-9_]*)/\\p \1/g
