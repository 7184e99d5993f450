"""SimulEval plug-in: `simuleval --user-dir agents/simuleval_plugins ...` registers our scorers (chrF as `CHRF`)
before SimulEval parses `--quality-metrics`, which happens before it imports the agent."""
import agents.harness.simuleval  # noqa: F401  (registers the CHRF quality scorer)
