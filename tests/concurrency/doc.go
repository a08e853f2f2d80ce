// Package concurrency holds the lost-update tests of the plugin binaries:
// many writer processes on one node, processes killed mid-write, and
// repairs racing with writers. Its figures are quoted in RELIABILITY.md.
//
// `make serve-suites` runs it twice more: with every call forwarded
// through a serve daemon (ERU_TEST_SERVE=1), and with that daemon SIGKILLed
// at random moments during each load and restarted (ERU_TEST_SERVE=kill),
// where a write that dies with the daemon is "outcome unknown" and the
// final state must still be exact (see ledger_test.go).
package concurrency
