"""Front end: .hk text -> typed AST -> checked kernel IR."""
