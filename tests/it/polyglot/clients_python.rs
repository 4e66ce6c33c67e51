//! The installable Python package (`clients/python`) against the real claimd: its wheel and
//! sdist built, the wheel installed into a fresh venv, its own pytest suite run on both
//! stores.
