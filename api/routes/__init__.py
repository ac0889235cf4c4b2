"""API routes, one module per resource; handlers stay thin (resolve, call explorer, return)."""
