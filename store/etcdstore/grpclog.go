package etcdstore

import "os"

// silentLogger is grpc's process-wide logger in the plugins: it drops every
// line, and answers false to V, which grpc asks before it builds what it
// would log at that verbosity. (A logger writing to io.Discard answers true
// to V(0): grpc then renders every resolver update as indented JSON for a
// trace event nobody reads, ~2% of a one-node call.) Fatal ends the process
// as grpc expects of it, without a word on stderr, which core reads as part
// of the answer.
type silentLogger struct{}

func (silentLogger) Info(...any)             {}
func (silentLogger) Infoln(...any)           {}
func (silentLogger) Infof(string, ...any)    {}
func (silentLogger) Warning(...any)          {}
func (silentLogger) Warningln(...any)        {}
func (silentLogger) Warningf(string, ...any) {}
func (silentLogger) Error(...any)            {}
func (silentLogger) Errorln(...any)          {}
func (silentLogger) Errorf(string, ...any)   {}
func (silentLogger) Fatal(...any)            { os.Exit(1) }
func (silentLogger) Fatalln(...any)          { os.Exit(1) }
func (silentLogger) Fatalf(string, ...any)   { os.Exit(1) }
func (silentLogger) V(int) bool              { return false }
