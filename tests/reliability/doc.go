// Package reliability holds the fault and security tests of the plugin binaries.
package reliability
