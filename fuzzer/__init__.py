"""fuzzer: a differential fuzzer for deep-learning operators.

Random operator graphs run on several backends (torch, jax, a float64 numpy
reference, plugins); disagreements are judged, shrunk and stored in a sqlite corpus.
"""

__version__ = "0.1.0"
# The name pip knows us by (`pip install 'opdiff-fuzz[ray]'`): "fuzzer" on the package index is another project.
DISTRIBUTION = "opdiff-fuzz"
