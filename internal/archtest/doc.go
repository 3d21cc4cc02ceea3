// Package archtest holds no code, only a test that enforces DESIGN.md's import direction:
// cmd/ferry → connect → {iggy, connect/plugin, sdk}; connectors/* → sdk; server → iggy/wire;
// iggy → iggy/wire; nothing points back up.
package archtest
