//go:build cgo

package memory

/*
// The few pieces of SQLite's stable C interface used here are declared
// rather than included: the header lives inside the driver's module. The
// symbols are the driver's own SQLite, linked into the same program.
typedef struct logIndexMethods {
	int iVersion;
	void *version1[12]; // xClose .. xDeviceCharacteristics
	int (*xShmMap)(void *file, int region, int size, int extend, void volatile **out);
} logIndexMethods;
typedef struct logIndexFile {
	const logIndexMethods *pMethods;
} logIndexFile;

extern int sqlite3_file_control(void *db, const char *schema, int op, void *arg);

// logIndexHeader returns the connection's own mapping of the first region
// of the log index (the -shm file), or NULL when there is none: the file
// is asked for its region 0 without extending it, as SQLite's readers do.
static void *logIndexHeader(void *db) {
	logIndexFile *f = 0;
	// 7 is SQLITE_FCNTL_FILE_POINTER.
	if (sqlite3_file_control(db, "main", 7, &f) != 0) return 0;
	if (f == 0 || f->pMethods == 0 || f->pMethods->iVersion < 2 || f->pMethods->xShmMap == 0) return 0;
	void volatile *p = 0;
	if (f->pMethods->xShmMap(f, 0, 32768, 0, &p) != 0) return 0;
	return (void *)p;
}
*/
import "C"

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"runtime/debug"
	"sync/atomic"
	"unsafe"

	"github.com/mattn/go-sqlite3"
)

// walHeader points at the start of the log index as SQLite itself maps
// it for the watching connection. The mapping is SQLite's: it lives while
// that connection is open, and this process never opens, maps or closes
// the -shm file itself. (Closing any descriptor of a file drops all of the
// process's POSIX locks on it, SQLite's included, and the next process to
// open the database would then take the log index for unused and reset
// it under this one.)
type walHeader struct{ p unsafe.Pointer }

// logIndexOf returns the log index header of conn, which must be a SQLite
// connection that has read the database in WAL mode.
func logIndexOf(conn *sql.Conn) (walHeader, error) {
	var h walHeader
	err := conn.Raw(func(dc any) error {
		db, err := sqliteHandle(dc)
		if err != nil {
			return err
		}
		h.p = C.logIndexHeader(db)
		if h.p == nil {
			return errors.New("no log index mapped")
		}
		return nil
	})
	return h, err
}

// sqliteHandle returns the sqlite3 handle of dc, a driver connection.
func sqliteHandle(dc any) (unsafe.Pointer, error) {
	sc, ok := dc.(*sqlite3.SQLiteConn)
	if !ok {
		return nil, fmt.Errorf("not a SQLite connection: %T", dc)
	}
	// The driver keeps its sqlite3 handle to itself.
	db := reflect.ValueOf(sc).Elem().FieldByName("db")
	if !db.IsValid() || db.Kind() != reflect.Pointer || db.IsNil() {
		return nil, errors.New("the driver's connection has no SQLite handle")
	}
	return db.UnsafePointer(), nil
}

// read returns the header, or false while a writer is rewriting it (its
// two copies differ) or before it was ever written. SQLite writes the
// second copy first and the first last; reading them in the other order,
// equal copies are one whole header.
func (h walHeader) read() (t changeToken, ok bool) {
	if h.p == nil {
		return changeToken{}, false
	}
	// A -shm file cut short by something other than SQLite would fault
	// (in SQLite too): say "cannot tell" rather than crash.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if recover() != nil {
			t, ok = changeToken{}, false
		}
	}()
	words := (*[2 * walHdrWords]uint32)(h.p)
	for i := range walHdrWords {
		t[i] = atomic.LoadUint32(&words[i])
	}
	for i := range walHdrWords {
		if atomic.LoadUint32(&words[walHdrWords+i]) != t[i] {
			return changeToken{}, false
		}
	}
	// isInit, the first byte of the fourth word, whatever the byte order.
	if (*[2 * walHdrWords * 4]byte)(h.p)[12] == 0 {
		return changeToken{}, false
	}
	return t, true
}
