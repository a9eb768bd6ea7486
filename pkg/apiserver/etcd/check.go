package etcd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/client/pkg/v3/fileutil"
	"go.etcd.io/etcd/server/v3/storage/wal"
	"go.etcd.io/etcd/server/v3/storage/wal/walpb"
	"go.uber.org/zap"
)

// DamagedError says etcd's data directory cannot be used as it is: a file is missing, truncated or not
// what etcd wrote. Start returns it instead of starting etcd on the data (where etcd would crash, hang
// or begin with an empty store).
type DamagedError struct {
	// Path is the file or directory at fault.
	Path string
	// Problem says what is wrong with it.
	Problem string
}

func (e *DamagedError) Error() string { return e.Path + ": " + e.Problem }

// Paths inside an etcd data directory.
func memberDir(dir string) string { return filepath.Join(dir, "member") }
func walDir(dir string) string    { return filepath.Join(dir, "member", "wal") }

// DBPath is the bbolt database file of the etcd data directory dir.
func DBPath(dir string) string { return filepath.Join(dir, "member", "snap", "db") }

// Check looks at the etcd data directory dir before etcd opens it, without changing anything. A
// directory without a member dir is new (nil, unless requireData says it must hold data). Otherwise the
// database file and the write-ahead log must both be there, the database must open read-only and
// read through (every bucket and key of it, every page they sit on), and the log's records must check
// out. Faults reading a damaged file are caught here, where etcd itself would panic in a goroutine of
// its own, or change the database before it found the log damaged.
func Check(dir string, requireData bool) error {
	member := memberDir(dir)
	if _, err := os.Stat(member); errors.Is(err, os.ErrNotExist) {
		if requireData {
			return &DamagedError{Path: member, Problem: "missing, although this data dir held etcd data before"}
		}
		return nil
	} else if err != nil {
		return err
	}
	wals, _ := filepath.Glob(filepath.Join(walDir(dir), "*.wal"))
	db := DBPath(dir)
	st, err := os.Stat(db)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if len(wals) > 0 {
			return &DamagedError{Path: db, Problem: "missing, while etcd's write-ahead log is there"}
		}
		if requireData {
			return &DamagedError{Path: db, Problem: "missing, although this data dir held etcd data before"}
		}
		return nil
	case err != nil:
		return err
	}
	if len(wals) == 0 {
		return &DamagedError{Path: walDir(dir), Problem: "no write-ahead log files, while the database is there"}
	}
	if st.Size() == 0 {
		return &DamagedError{Path: db, Problem: "empty (0 bytes)"}
	}
	if err := checkDB(db, st.Size()); err != nil {
		return &DamagedError{Path: db, Problem: err.Error()}
	}
	slices.Sort(wals)
	if err := checkWAL(walDir(dir), wals[0]); err != nil {
		return &DamagedError{Path: walDir(dir), Problem: err.Error()}
	}
	return nil
}

// checkWAL reads the write-ahead log through, read-only, as etcd does to find its snapshots: every
// record's checksum must hold, and the oldest file must start with a readable record. A torn last
// record is not damage (etcd drops it, as after a crash mid-write); garbage from the first record on
// would pass for one, and etcd would then start without the log's metadata.
func checkWAL(dir, oldest string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unreadable (%v)", r)
		}
	}()
	f, err := os.Open(oldest)
	if err != nil {
		return err
	}
	var rec walpb.Record
	err = wal.NewDecoder(fileutil.NewFileReader(f)).Decode(&rec)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s is unreadable from its first record (%v)", filepath.Base(oldest), err)
	}
	if _, err := wal.ValidSnapshotEntries(zap.NewNop(), dir); err != nil {
		return fmt.Errorf("unreadable (%v)", err)
	}
	return nil
}

// checkDB opens the bbolt file read-only and reads all of it that etcd's buckets reach.
func checkDB(path string, size int64) (err error) {
	// A truncated or overwritten file makes bbolt read past the file's end or through garbage
	// pointers in its memory map: turn those faults into panics, and the panics into an error.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("unreadable (%v)", r)
		}
	}()
	db, err := bolt.Open(path, 0o400, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if errors.Is(err, bolt.ErrTimeout) {
		return errors.New("locked by another process")
	}
	if err != nil {
		return fmt.Errorf("not a database etcd can open (%v)", err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		if tx.Size() > size {
			return fmt.Errorf("truncated: its pages reach %d bytes, the file has %d", tx.Size(), size)
		}
		var buckets []string
		err := tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			buckets = append(buckets, string(name))
			return walk(b)
		})
		if err != nil {
			return err
		}
		for _, want := range []string{"key", "meta"} {
			if !slices.Contains(buckets, want) {
				return fmt.Errorf("no %q bucket (buckets: %s): not etcd's database", want, strings.Join(buckets, ", "))
			}
		}
		return nil
	})
}

// walk reads every key and value of b and its nested buckets.
func walk(b *bolt.Bucket) error {
	var sink byte
	err := b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return walk(nested)
			}
			return nil
		}
		for i := 0; i < len(v); i += 1024 {
			sink ^= v[i]
		}
		return nil
	})
	_ = sink
	return err
}
