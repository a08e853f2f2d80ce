package boltstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
	bolt "go.etcd.io/bbolt"

	"github.com/eru-extend/resources/store"
	"github.com/eru-extend/resources/store/boltstore"
	"github.com/eru-extend/resources/types"
)

// filled writes a store with enough records to span many pages and returns
// its path and bytes.
func filled(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := boltstore.Open(path, boltstore.Options{Create: true, Prefix: "/eru"})
	require.NoError(t, err)
	for i := range 200 {
		require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: fmt.Sprintf("/resource/storage/n%03d", i), Value: bytes.Repeat([]byte{'v'}, 3000)}}))
	}
	require.NoError(t, s.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return path, data
}

// modes are every way the plugins open the store.
var modes = []struct {
	name string
	opts boltstore.Options
}{
	{"a reader", boltstore.Options{ReadOnly: true}},
	{"a reader that needs the file", boltstore.Options{ReadOnly: true, MustExist: true}},
	{"a writer", boltstore.Options{}},
	{"a writer that may create the store", boltstore.Options{Create: true}},
}

// requireDataLoss opens path in every mode, reads and writes through what
// opens, and checks that each step that fails is one data_loss error naming
// the file, that at least opening or reading fails, and that the file's
// bytes are untouched.
func requireDataLoss(t *testing.T, path, want string) {
	t.Helper()
	before, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, m := range modes {
		t.Run(m.name+" gets data_loss naming the file", func(t *testing.T) {
			opts := m.opts
			opts.Prefix = "/eru"
			s, err := boltstore.Open(path, opts)
			if err == nil {
				_, err = s.Read(context.Background(), []string{"/resource/storage/n100"}, []string{"/resource/"})
				if !opts.ReadOnly && err == nil {
					err = s.Txn(context.Background(), nil, []store.Op{{Key: "/x", Value: []byte("y")}})
				}
				require.NoError(t, s.Close())
			}
			require.Error(t, err, "a damaged file must not read as a store")
			require.Equal(t, types.DataLoss, types.ClassOf(err), "%v", err)
			require.ErrorContains(t, err, "embedded store "+path+": ")
			require.ErrorContains(t, err, want)
			require.NotContains(t, err.Error(), "\n")
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, before, after, "the file is left as it was")
		})
	}
}

func TestADamagedFileIsDataLossNeverAPanic(t *testing.T) {
	path, data := filled(t)
	t.Run("a file truncated to half", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, data[:len(data)/2], 0o644))
		requireDataLoss(t, path, "truncated: its pages reach")
	})
	t.Run("a file truncated to a few pages", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, data[:9000], 0o644))
		requireDataLoss(t, path, "truncated")
	})
	t.Run("a file truncated inside its meta pages", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, data[:100], 0o644))
		requireDataLoss(t, path, "not a store of this project, or damaged")
	})
	t.Run("a zero-length file", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, nil, 0o644))
		requireDataLoss(t, path, "is empty (0 bytes), not a store")
	})
	t.Run("a text file", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, bytes.Repeat([]byte("not a database\n"), 5000), 0o644))
		requireDataLoss(t, path, "not a store of this project, or damaged: invalid database")
	})
	t.Run("a bbolt file of another program", func(t *testing.T) {
		other := filepath.Join(t.TempDir(), "other.db")
		db, err := bolt.Open(other, 0o644, nil)
		require.NoError(t, err)
		require.NoError(t, db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("users")); return err }))
		require.NoError(t, db.Close())
		requireDataLoss(t, other, `holds a bucket "users": not a store of this project`)
	})
	t.Run("a page overwritten with garbage", func(t *testing.T) {
		damaged := bytes.Clone(data)
		for i := 4 * 4096; i < 40*4096 && i < len(damaged); i++ {
			damaged[i] = 0xff
		}
		require.NoError(t, os.WriteFile(path, damaged, 0o644))
		requireDataLoss(t, path, "damaged")
	})
	t.Run("the whole file again opens, reads and writes", func(t *testing.T) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		s, err := boltstore.Open(path, boltstore.Options{Prefix: "/eru"})
		require.NoError(t, err)
		defer s.Close()
		items, err := store.Range(context.Background(), s, "/resource/")
		require.NoError(t, err)
		require.Len(t, items, 200)
		require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: "/x", Value: []byte("y")}}))
	})
}

func TestOnlyAnAbsentFileIsCreated(t *testing.T) {
	dir := t.TempDir()
	t.Run("a writer that may create the store creates it with its marks", func(t *testing.T) {
		path := filepath.Join(dir, "new", "state.db")
		s, err := boltstore.Open(path, boltstore.Options{Create: true})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true})
		require.NoError(t, err)
		defer db.Close()
		require.NoError(t, db.View(func(tx *bolt.Tx) error {
			require.NotNil(t, tx.Bucket([]byte("kv")))
			require.Equal(t, "eru-resources/1", string(tx.Bucket([]byte("meta")).Get([]byte("format"))))
			return nil
		}))
	})
	t.Run("a store made before the marks existed still opens", func(t *testing.T) {
		path := filepath.Join(dir, "old.db")
		db, err := bolt.Open(path, 0o644, nil)
		require.NoError(t, err)
		require.NoError(t, db.Close())
		s, err := boltstore.Open(path, boltstore.Options{})
		require.NoError(t, err)
		require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}}))
		require.NoError(t, s.Close())
	})
	t.Run("a folder where the file should be is refused", func(t *testing.T) {
		path := filepath.Join(dir, "folder.db")
		require.NoError(t, os.Mkdir(path, 0o755))
		_, err := boltstore.Open(path, boltstore.Options{Create: true})
		require.Equal(t, types.DataLoss, types.ClassOf(err))
		require.ErrorContains(t, err, "is not a regular file")
	})
}

// The tests below run a copy of this test binary as another user: as root
// (how the suite runs here) the child is uid/gid 65534; as anyone else the
// child is the same user, and file modes alone deny it.

const helperEnv = "BOLTSTORE_TEST_HELPER"

// TestMain lets the test binary serve as the helper process: with
// BOLTSTORE_TEST_HELPER=read or write it opens the store named by the
// argument, reads (and writes), and prints "ok" or the error's class and
// message.
func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode, os.Getenv("BOLTSTORE_TEST_PATH")))
	}
	os.Exit(m.Run())
}

func helper(mode, path string) int {
	s, err := boltstore.Open(path, boltstore.Options{ReadOnly: mode == "read", MustExist: true, Prefix: "/eru"})
	if err == nil {
		defer s.Close()
		var v []byte
		v, _, err = store.Get(context.Background(), s, "/k")
		if err == nil && string(v) != "v" {
			err = fmt.Errorf("read %q, want \"v\"", v)
		}
		if err == nil && mode == "write" {
			err = s.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("w")}})
		}
	}
	if err != nil {
		fmt.Printf("%s: %s\n", types.ClassOf(err), err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// asOtherUser runs the helper on path as another user and returns its
// output.
func asOtherUser(t *testing.T, bin, mode, path string) string {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, "BOLTSTORE_TEST_PATH="+path)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, _ := cmd.CombinedOutput()
	return strings.TrimSpace(string(out))
}

// helperBinary copies this test binary where any user may run it.
func helperBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	dir := openToAll(t)
	bin := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	return bin
}

// openToAll is a temporary folder every user may enter and list.
func openToAll(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	return dir
}

func TestAnotherUser(t *testing.T) {
	bin := helperBinary(t)
	setup := func(t *testing.T) (dir, path string) {
		dir = openToAll(t)
		path = filepath.Join(dir, "state.db")
		s, err := boltstore.Open(path, boltstore.Options{Create: true, Prefix: "/eru"})
		require.NoError(t, err)
		require.NoError(t, s.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}}))
		require.NoError(t, s.Close())
		return dir, path
	}
	t.Run("a user who may only read the folder and the files reads the store", func(t *testing.T) {
		dir, path := setup(t)
		require.NoError(t, os.Chmod(path, 0o444))
		require.NoError(t, os.Chmod(path+".lock", 0o444))
		require.NoError(t, os.Chmod(dir, 0o555))
		require.Equal(t, "ok", asOtherUser(t, bin, "read", path))
	})
	t.Run("a reader needs no lock file when it may not create one", func(t *testing.T) {
		dir, path := setup(t)
		require.NoError(t, os.Remove(path+".lock"))
		require.NoError(t, os.Chmod(path, 0o444))
		require.NoError(t, os.Chmod(dir, 0o555))
		require.Equal(t, "ok", asOtherUser(t, bin, "read", path))
		require.NoFileExists(t, path+".lock")
	})
	t.Run("a reader of a lock file it may not read still reads the store", func(t *testing.T) {
		_, path := setup(t)
		require.NoError(t, os.Chmod(path, 0o444))
		require.NoError(t, os.Chmod(path+".lock", 0o000))
		require.Equal(t, "ok", asOtherUser(t, bin, "read", path))
	})
	t.Run("that user's write is permission_denied naming the file", func(t *testing.T) {
		dir, path := setup(t)
		require.NoError(t, os.Chmod(path, 0o444))
		require.NoError(t, os.Chmod(path+".lock", 0o444))
		require.NoError(t, os.Chmod(dir, 0o555))
		out := asOtherUser(t, bin, "write", path)
		require.True(t, strings.HasPrefix(out, "permission_denied: embedded store "+path+": "), out)
		require.Contains(t, out, "permission denied")
	})
	t.Run("a state file the user may not read is permission_denied naming it", func(t *testing.T) {
		_, path := setup(t)
		require.NoError(t, os.Chmod(path, 0o000))
		require.NoError(t, os.Chmod(path+".lock", 0o444))
		out := asOtherUser(t, bin, "read", path)
		require.Equal(t, "permission_denied: embedded store "+path+": open "+path+": permission denied", out)
	})
}

func TestAWriterThatMayNotCreateTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := boltstore.Open(path, boltstore.Options{EmptyIfMissing: true})
	require.NoError(t, err)
	defer s.Close()
	t.Run("reads a missing file as an empty store", func(t *testing.T) {
		snap, err := s.Read(context.Background(), []string{"/k"}, []string{"/"})
		require.NoError(t, err)
		require.Empty(t, snap.Items)
	})
	t.Run("and a write to it fails naming the file, creating nothing", func(t *testing.T) {
		err := s.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}})
		require.ErrorIs(t, err, store.ErrMissing)
		require.Equal(t, types.FailedPrecondition, types.ClassOf(err))
		require.ErrorContains(t, err, "embedded store "+path)
		require.NoFileExists(t, path)
	})
	t.Run("an existing file opens for writing as usual", func(t *testing.T) {
		created, err := boltstore.Open(path, boltstore.Options{Create: true})
		require.NoError(t, err)
		require.NoError(t, created.Close())
		w, err := boltstore.Open(path, boltstore.Options{EmptyIfMissing: true})
		require.NoError(t, err)
		require.NoError(t, w.Txn(context.Background(), nil, []store.Op{{Key: "/k", Value: []byte("v")}}))
		require.NoError(t, w.Close())
	})
}
