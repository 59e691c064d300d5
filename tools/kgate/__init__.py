"""kgate: cross-architecture kernel regression gate (tooling)."""
