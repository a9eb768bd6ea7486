package auth

import (
	"os"
	"strings"
	"sync"
	"time"
)

// FileTokenRecheck is how long FileToken goes on with a token before reading its file again even
// though the file looks unchanged (a rewrite within the file system's mtime granularity, same size).
const FileTokenRecheck = time.Minute

// FileToken is a token kept in a file that is rewritten while the process runs, as the kubelet rewrites
// a projected service account token at 80% of its lifetime: Token reads the file again when its
// modification time or size changes, or FileTokenRecheck after it last read it.
type FileToken struct {
	path string
	now  func() time.Time

	mu    sync.Mutex
	token string
	mtime time.Time
	size  int64
	read  time.Time
}

// NewFileToken is a FileToken for the file at path, whose contents were last read as token ("" to read
// it on first use).
func NewFileToken(path, token string) *FileToken {
	f := &FileToken{path: path, now: time.Now, token: token}
	if token != "" {
		if fi, err := os.Stat(path); err == nil {
			f.mtime, f.size = fi.ModTime(), fi.Size()
		}
		f.read = f.now()
	}
	return f
}

// Token is the file's token, with surrounding whitespace removed. While the file cannot be read or is
// empty (a rewrite under way) it is the token last read.
func (f *FileToken) Token() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	fi, err := os.Stat(f.path)
	if err != nil {
		return f.token
	}
	if f.token != "" && fi.ModTime().Equal(f.mtime) && fi.Size() == f.size && f.now().Sub(f.read) < FileTokenRecheck {
		return f.token
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return f.token
	}
	if t := strings.TrimSpace(string(b)); t != "" {
		f.token, f.mtime, f.size, f.read = t, fi.ModTime(), fi.Size(), f.now()
	}
	return f.token
}
