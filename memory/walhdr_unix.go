//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package memory

import (
	"errors"
	"os"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// walHeader is the start of the -shm file, mapped read-only.
type walHeader []byte

// mapWALHeader maps the header of the log index at path.
func mapWALHeader(path string) (walHeader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() < 2*walHdrWords*4 {
		return nil, errors.New("log index not built")
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, 2*walHdrWords*4, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return walHeader(b), nil
}

// read returns the header, or false while a writer is rewriting it (its
// two copies differ) or before it was ever written.
func (h walHeader) read() (t changeToken, ok bool) {
	// A file cut short under the mapping would fault: say "cannot tell"
	// rather than crash. start rules it out; this is in case.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			t, ok = changeToken{}, false
		}
	}()
	words := (*[2 * walHdrWords]uint32)(unsafe.Pointer(unsafe.SliceData(h)))
	for i := range walHdrWords {
		t[i] = atomic.LoadUint32(&words[i])
	}
	for i := range walHdrWords {
		if atomic.LoadUint32(&words[walHdrWords+i]) != t[i] {
			return changeToken{}, false
		}
	}
	// isInit, the first byte of the fourth word, whatever the byte order.
	if (*[2 * walHdrWords * 4]byte)(h)[12] == 0 {
		return changeToken{}, false
	}
	return t, true
}

func (h walHeader) unmap() { syscall.Munmap(h) }
