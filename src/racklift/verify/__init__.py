"""The gate: compare what hosts are with what NetBox says, check their health, decide."""
