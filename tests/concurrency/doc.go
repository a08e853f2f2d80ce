// Package concurrency holds the lost-update tests of the plugin binaries:
// many writer processes on one node, processes killed mid-write, and
// repairs racing with writers. Its figures are quoted in RELIABILITY.md.
package concurrency
