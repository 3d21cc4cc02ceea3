// Package archtest holds no code, only a test that enforces the import direction of
// docs/architecture.md ("Packages and their one-way imports"):
// cmd/ferry → ferrycli → connect → {iggy, connect/plugin, sdk}; connectors/* → sdk; server → iggy/wire;
// iggy → iggy/wire; nothing points back up.
package archtest
