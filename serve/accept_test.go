package serve

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/eru-extend/resources/internal/forward"
)

// TestTheDaemonAcceptsAgainAfterRunningOutOfDescriptors: a daemon that
// cannot take a connection for a moment (out of descriptors: EMFILE) goes
// on taking calls once it can. Otherwise every later connection waits in
// the listen queue: reads run locally after forward.ReadStall each, and a
// write, its small request taken by the socket's buffer, waits for its
// status until core's timeout kills it, until an operator restarts the
// daemon.
func TestTheDaemonAcceptsAgainAfterRunningOutOfDescriptors(t *testing.T) {
	_, file := flowDaemon(t, "", AdmitAll)
	sock := filepath.Join(filepath.Dir(file), forward.DefaultSocket)
	code, handled, out, errOut := forwardCall(t, file, "name", "")
	require.True(t, handled)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "\"storage\"\n", out)

	// Client sockets made first: connecting them takes no descriptor of
	// this process, accepting them takes one of the daemon's (the same
	// process here).
	var clients []int
	for range 4 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		clients = append(clients, fd)
	}
	defer func() {
		for _, fd := range clients {
			_ = unix.Close(fd)
		}
	}()
	var was unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &was))
	probe, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	low := was
	low.Cur = uint64(probe) + 16
	var fillers []int
	func() {
		defer func() { require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &was)) }()
		require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
		for {
			fd, err := unix.Dup(probe)
			if err != nil {
				require.ErrorIs(t, err, unix.EMFILE)
				break
			}
			fillers = append(fillers, fd)
		}
		for _, fd := range clients {
			require.NoError(t, unix.Connect(fd, &unix.SockaddrUnix{Name: sock}))
		}
		time.Sleep(200 * time.Millisecond) // the daemon tries to accept them, and cannot
	}()
	for _, fd := range append(fillers, probe) {
		require.NoError(t, unix.Close(fd))
	}

	start := time.Now()
	code, handled, out, errOut = forwardCall(t, file, "name", "")
	require.True(t, handled, "the daemon took no call after %s: it stopped accepting", time.Since(start).Round(time.Millisecond))
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "\"storage\"\n", out)
}

// TestAHalfSentRequestHoldsOnlyWhatArrived: a connection that announces a
// stdin of the largest size and sends none of it (a client stuck, or one
// misbehaving) holds the daemon's memory for what arrived, not for what
// was announced, for the 30 s the daemon waits for a request.
func TestAHalfSentRequestHoldsOnlyWhatArrived(t *testing.T) {
	_, file := flowDaemon(t, "", AdmitAll)
	sock := filepath.Join(filepath.Dir(file), forward.DefaultSocket)
	head, err := forward.Request{Binary: "storage", Args: []string{"get-node-resource-info"}, Config: file, Dir: filepath.Dir(file), Verb: "get-node-resource-info"}.MarshalBinary()
	require.NoError(t, err)
	var half bytes.Buffer
	require.NoError(t, forward.WriteFrame(&half, head))
	half.Write([]byte{0x01, 0x00, 0x00, 0x01}) // a stdin frame of 16 MiB and one byte, none of which follows
	const conns = 16
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for range conns {
		c, err := net.Dial("unix", sock)
		require.NoError(t, err)
		defer c.Close()
		_, err = c.Write(half.Bytes())
		require.NoError(t, err)
	}
	time.Sleep(300 * time.Millisecond) // the daemon reads what was sent
	grown := int64(heap()) - int64(before)
	require.Less(t, grown, int64(conns<<20), "%d connections that sent a frame's length and nothing more hold %d MiB", conns, grown>>20)
}
