"""Code shared by every agent: configuration loading and the SimulEval / simulstream protocol adapters."""
