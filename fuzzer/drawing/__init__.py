"""Drawing cases: the regions, regimes and strategies a graph and its inputs are drawn from."""
