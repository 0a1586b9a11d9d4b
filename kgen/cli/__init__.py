"""The `kgen` command line (entry point kgen.cli.main:main); one module per subcommand."""
