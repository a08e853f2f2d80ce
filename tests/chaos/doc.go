// Package chaos proves that a write the plugins report is a write that
// happened: a three-member etcd cluster of separate processes (the test
// binary itself running tests/chaos/etcdmember) has its leader killed and stopped over and over,
// behind proxies that delay answers and cut connections after forwarding
// writes, while writer processes each own one device and check every
// answer against the store.
package chaos
