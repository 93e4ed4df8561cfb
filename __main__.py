"""Pulumi entry point: `pulumi up -s <stack>` runs this. It only calls the program."""

from infra.program import program

program()
