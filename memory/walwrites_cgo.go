//go:build cgo

package memory

/*
#include <stdlib.h>
#include <string.h>

// SQLite's stable C interface, declared rather than included as in
// logindex_cgo.go: the header lives inside the driver's module, and the
// symbols are the driver's own SQLite, linked into the same program.
typedef long long walI64;
typedef struct walIoMethods walIoMethods;
typedef struct walSqliteFile {
	const walIoMethods *pMethods;
} walSqliteFile;
struct walIoMethods {
	int iVersion;
	int (*xClose)(walSqliteFile *);
	int (*xRead)(walSqliteFile *, void *, int, walI64);
	int (*xWrite)(walSqliteFile *, const void *, int, walI64);
	int (*xTruncate)(walSqliteFile *, walI64);
	int (*xSync)(walSqliteFile *, int);
	int (*xFileSize)(walSqliteFile *, walI64 *);
	int (*xLock)(walSqliteFile *, int);
	int (*xUnlock)(walSqliteFile *, int);
	int (*xCheckReservedLock)(walSqliteFile *, int *);
	int (*xFileControl)(walSqliteFile *, int, void *);
	int (*xSectorSize)(walSqliteFile *);
	int (*xDeviceCharacteristics)(walSqliteFile *);
	int (*xShmMap)(walSqliteFile *, int, int, int, void volatile **);
	int (*xShmLock)(walSqliteFile *, int, int, int);
	void (*xShmBarrier)(walSqliteFile *);
	int (*xShmUnmap)(walSqliteFile *, int);
	int (*xFetch)(walSqliteFile *, walI64, int, void **);
	int (*xUnfetch)(walSqliteFile *, walI64, void *);
};
typedef struct walVfs walVfs;
typedef void (*walSyscall)(void);
struct walVfs {
	int iVersion;
	int szOsFile;
	int mxPathname;
	walVfs *pNext;
	const char *zName;
	void *pAppData;
	int (*xOpen)(walVfs *, const char *, walSqliteFile *, int, int *);
	int (*xDelete)(walVfs *, const char *, int);
	int (*xAccess)(walVfs *, const char *, int, int *);
	int (*xFullPathname)(walVfs *, const char *, int, char *);
	void *(*xDlOpen)(walVfs *, const char *);
	void (*xDlError)(walVfs *, int, char *);
	walSyscall (*xDlSym)(walVfs *, void *, const char *);
	void (*xDlClose)(walVfs *, void *);
	int (*xRandomness)(walVfs *, int, char *);
	int (*xSleep)(walVfs *, int);
	int (*xCurrentTime)(walVfs *, double *);
	int (*xGetLastError)(walVfs *, int, char *);
	int (*xCurrentTimeInt64)(walVfs *, walI64 *);
	int (*xSetSystemCall)(walVfs *, const char *, walSyscall);
	walSyscall (*xGetSystemCall)(walVfs *, const char *);
	const char *(*xNextSystemCall)(walVfs *, const char *);
};
extern walVfs *sqlite3_vfs_find(const char *);
extern int sqlite3_vfs_register(walVfs *, int);
extern int sqlite3_file_control(void *db, const char *schema, int op, void *arg);
extern void sqlite3_free(void *);
extern char *sqlite3_mprintf(const char *, ...);
extern walSqliteFile *sqlite3_database_file_object(const char *);

#define WAL_OK 0
#define WAL_OPEN_WAL 0x00080000
#define WAL_FRAME_HEADER 24
// Gathered bytes past this are written at once: a transaction that large
// (an import) gains nothing more from gathering, and the unix VFS writes
// at most 128 KiB a call (it masks a larger size, and takes the short
// write for a full disk).
#define WAL_GATHER_MAX (1 << 16)

// walFile is a file of the gathering VFS: the unix VFS's own file follows
// it in the same allocation. A connection's database file and its log
// know each other, and a connection is used by one thread at a time, so
// none of this needs a lock.
typedef struct walFile {
	walSqliteFile base;
	walSqliteFile *real;
	int log;               // the write-ahead log: its writes are gathered
	struct walFile *db;    // a log: its connection's database file
	struct walFile *logf;  // a database file: its connection's log, while open
	unsigned char *buf;
	int n, cap;            // buf holds the bytes for [off, off+n)
	walI64 off;
	walI64 commitPage;     // where the commit frame's page goes, once its header came; -1: none
	int through;           // a commit was written: writes go straight to the file until the next lock or barrier
	int err;               // a write that failed where its error could not be returned
} walFile;

static walVfs *walReal;
static walVfs walGather;

// walFlush writes p's gathered bytes. They go either way: bytes that
// failed to be written must never reach the file later, after other
// writes (the transaction they were for fails with this error).
static int walFlush(walFile *p) {
	if (p->n == 0) return WAL_OK;
	int rc = p->real->pMethods->xWrite(p->real, p->buf, p->n, p->off);
	p->n = 0;
	return rc;
}

// walPending returns, and forgets, the error of a write that failed where
// it could not be returned (see walOwnLog), else flushes p.
static int walPending(walFile *p) {
	if (p->err != WAL_OK) {
		int rc = p->err;
		p->err = WAL_OK;
		p->n = 0;
		return rc;
	}
	return walFlush(p);
}

// walOwnLog writes what the database file d's log has gathered, before a
// lock of the log index changes or a barrier publishes its header, and
// ends the writes straight through of a commit. A failure here has no one
// to tell: the log returns it from its next call.
static void walOwnLog(walFile *d) {
	walFile *p = d->logf;
	if (p == 0) return;
	int rc = walFlush(p);
	if (rc != WAL_OK && p->err == WAL_OK) p->err = rc;
	p->through = 0;
	p->commitPage = -1;
}

static int walGatherWrite(walFile *p, const void *z, int amt, walI64 off) {
	int rc = p->err;
	if (rc != WAL_OK || p->through) {
		p->commitPage = -1;
		if (rc != WAL_OK) {
			p->err = WAL_OK;
			p->n = 0;
			return rc;
		}
		// After a commit's frames, SQLite may write headers again (their
		// checksums) and pad the log: each goes to the file at once, so
		// that its error is the commit's too.
		return p->real->pMethods->xWrite(p->real, z, amt, off);
	}
	// p->n is 0 here only when nothing is gathered.
	if (p->n > 0 && off == p->off + p->n && p->n + amt <= WAL_GATHER_MAX) {
		// appended: the common case
	} else if (p->n > 0 && off >= p->off && off + amt <= p->off + p->n) {
		// a frame of this transaction written again
		memcpy(p->buf + (off - p->off), z, amt);
		p->commitPage = -1;
		return WAL_OK;
	} else {
		rc = walFlush(p);
		if (rc != WAL_OK || amt > WAL_GATHER_MAX) {
			p->commitPage = -1;
			return rc != WAL_OK ? rc : p->real->pMethods->xWrite(p->real, z, amt, off);
		}
		p->off = off;
	}
	if (p->n + amt > p->cap) {
		int cap = p->cap ? p->cap : 32768;
		while (cap < p->n + amt) cap *= 2;
		unsigned char *b = realloc(p->buf, cap);
		if (!b) {
			// Written as SQLite asked, after what came before.
			p->commitPage = -1;
			rc = walFlush(p);
			return rc != WAL_OK ? rc : p->real->pMethods->xWrite(p->real, z, amt, off);
		}
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->n, z, amt);
	p->n += amt;
	// A commit frame's header carries the database's size after the
	// commit (bytes 4-7, zero in every other frame), and its page follows
	// it at once: the transaction's last frame. Written then, an error is
	// the commit's to return, before SQLite publishes the frames.
	if (p->commitPage >= 0 && off == p->commitPage) {
		p->commitPage = -1;
		p->through = 1;
		return walFlush(p);
	}
	p->commitPage = -1;
	if (amt == WAL_FRAME_HEADER) {
		const unsigned char *h = z;
		if ((h[4] | h[5] | h[6] | h[7]) != 0) p->commitPage = off + WAL_FRAME_HEADER;
	}
	return WAL_OK;
}

static int walClose(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	if (p->logf) {
		// The database file before its log, which SQLite does not do:
		// the log's writes go straight to it from now on.
		walOwnLog(p);
		p->logf->db = 0;
		p->logf->log = 0;
	}
	int rc = walPending(p);
	if (p->db && p->db->logf == p) p->db->logf = 0;
	free(p->buf);
	p->buf = 0;
	int rc2 = p->real->pMethods->xClose(p->real);
	return rc != WAL_OK ? rc : rc2;
}

// walBefore readies a log for any call but a write: what it gathered is
// written, and an error left from a lock or a barrier is returned.
static int walBefore(walFile *p) {
	return walPending(p);
}

static int walRead(walSqliteFile *f, void *z, int amt, walI64 off) {
	walFile *p = (walFile *)f;
	int rc = walBefore(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xRead(p->real, z, amt, off);
}

static int walWrite(walSqliteFile *f, const void *z, int amt, walI64 off) {
	walFile *p = (walFile *)f;
	if (p->log) return walGatherWrite(p, z, amt, off);
	return p->real->pMethods->xWrite(p->real, z, amt, off);
}

static int walTruncate(walSqliteFile *f, walI64 size) {
	walFile *p = (walFile *)f;
	int rc = walBefore(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(walSqliteFile *f, int flags) {
	walFile *p = (walFile *)f;
	int rc = walBefore(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(walSqliteFile *f, walI64 *size) {
	walFile *p = (walFile *)f;
	int rc = walBefore(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xFileSize(p->real, size);
}

static int walLock(walSqliteFile *f, int l) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xLock(p->real, l);
}

static int walUnlock(walSqliteFile *f, int l) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xUnlock(p->real, l);
}

static int walCheckReservedLock(walSqliteFile *f, int *out) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xCheckReservedLock(p->real, out);
}

static int walFileControl(walSqliteFile *f, int op, void *arg) {
	walFile *p = (walFile *)f;
	int rc = walBefore(p);
	if (rc != WAL_OK) return rc;
	rc = p->real->pMethods->xFileControl(p->real, op, arg);
	// 12 is SQLITE_FCNTL_VFSNAME: a shim names itself before the VFS
	// under it.
	if (op == 12 && rc == WAL_OK) {
		char **name = arg;
		char *both = sqlite3_mprintf("%s/%s", walGather.zName, *name ? *name : "");
		sqlite3_free(*name);
		*name = both;
	}
	return rc;
}

static int walSectorSize(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xSectorSize(p->real);
}

static int walDeviceCharacteristics(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xDeviceCharacteristics(p->real);
}

static int walShmMap(walSqliteFile *f, int pg, int size, int extend, void volatile **out) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xShmMap(p->real, pg, size, extend, out);
}

// walShmLock and walShmBarrier are the database file's: SQLite publishes
// a commit's frames in the log index's header after a barrier, and a
// writer gives the log over to the next by unlocking. Before either,
// every byte the connection's log gathered is in the file, where the next
// reader or writer looks for it. Another connection's are left alone:
// they are not its to publish, and an error writing them would be lost.
static int walShmLock(walSqliteFile *f, int offset, int n, int flags) {
	walFile *p = (walFile *)f;
	walOwnLog(p);
	return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void walShmBarrier(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	walOwnLog(p);
	p->real->pMethods->xShmBarrier(p->real);
}

static int walShmUnmap(walSqliteFile *f, int del) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xShmUnmap(p->real, del);
}

static int walFetch(walSqliteFile *f, walI64 off, int amt, void **pp) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xFetch(p->real, off, amt, pp);
}

static int walUnfetch(walSqliteFile *f, walI64 off, void *ptr) {
	walFile *p = (walFile *)f;
	return p->real->pMethods->xUnfetch(p->real, off, ptr);
}

// The methods each version of the unix VFS's files has: a file is given
// the set of its real file's version, so that SQLite never calls one the
// real file lacks.
static walIoMethods walMethods[4];

// walOurs reports whether f is a file of this VFS.
static int walOurs(walSqliteFile *f) {
	return f && f->pMethods && f->pMethods >= &walMethods[1] && f->pMethods <= &walMethods[3];
}

static int walOpen(walVfs *vfs, const char *name, walSqliteFile *f, int flags, int *out) {
	walFile *p = (walFile *)f;
	memset(p, 0, sizeof *p);
	p->real = (walSqliteFile *)&p[1];
	int rc = walReal->xOpen(walReal, name, p->real, flags, out);
	const walIoMethods *m = p->real->pMethods;
	if (m == 0) {
		p->base.pMethods = 0;
		return rc;
	}
	int v = m->iVersion < 1 ? 1 : m->iVersion > 3 ? 3 : m->iVersion;
	p->base.pMethods = &walMethods[v];
	p->commitPage = -1;
	if (flags & WAL_OPEN_WAL) {
		// The log's writes are gathered only when its connection's
		// database file is this VFS's, whose locks and barriers write
		// them out.
		walSqliteFile *db = sqlite3_database_file_object(name);
		if (walOurs(db)) {
			p->log = 1;
			p->db = (walFile *)db;
			p->db->logf = p;
		}
	}
	return rc;
}

static int walDelete(walVfs *v, const char *name, int syncDir) { return walReal->xDelete(walReal, name, syncDir); }
static int walAccess(walVfs *v, const char *name, int flags, int *out) { return walReal->xAccess(walReal, name, flags, out); }
static int walFullPathname(walVfs *v, const char *name, int n, char *out) { return walReal->xFullPathname(walReal, name, n, out); }
static void *walDlOpen(walVfs *v, const char *name) { return walReal->xDlOpen(walReal, name); }
static void walDlError(walVfs *v, int n, char *msg) { walReal->xDlError(walReal, n, msg); }
static walSyscall walDlSym(walVfs *v, void *h, const char *sym) { return walReal->xDlSym(walReal, h, sym); }
static void walDlClose(walVfs *v, void *h) { walReal->xDlClose(walReal, h); }
static int walRandomness(walVfs *v, int n, char *out) { return walReal->xRandomness(walReal, n, out); }
static int walSleep(walVfs *v, int us) { return walReal->xSleep(walReal, us); }
static int walCurrentTime(walVfs *v, double *t) { return walReal->xCurrentTime(walReal, t); }
static int walGetLastError(walVfs *v, int n, char *msg) { return walReal->xGetLastError(walReal, n, msg); }
static int walCurrentTimeInt64(walVfs *v, walI64 *t) { return walReal->xCurrentTimeInt64(walReal, t); }

// walRegister registers the gathering VFS under name, on top of the unix
// VFS; 0 on success.
static int walRegister(const char *name) {
	walReal = sqlite3_vfs_find("unix");
	if (walReal == 0 || walReal->iVersion < 2) return 1;
	for (int v = 1; v <= 3; v++) {
		walIoMethods m = {
			v, walClose, walRead, walWrite, walTruncate, walSync, walFileSize,
			walLock, walUnlock, walCheckReservedLock, walFileControl,
			walSectorSize, walDeviceCharacteristics,
		};
		if (v >= 2) {
			m.xShmMap = walShmMap;
			m.xShmLock = walShmLock;
			m.xShmBarrier = walShmBarrier;
			m.xShmUnmap = walShmUnmap;
		}
		if (v >= 3) {
			m.xFetch = walFetch;
			m.xUnfetch = walUnfetch;
		}
		walMethods[v] = m;
	}
	walGather.iVersion = 2;
	walGather.szOsFile = (int)sizeof(walFile) + walReal->szOsFile;
	walGather.mxPathname = walReal->mxPathname;
	walGather.zName = name;
	walGather.xOpen = walOpen;
	walGather.xDelete = walDelete;
	walGather.xAccess = walAccess;
	walGather.xFullPathname = walFullPathname;
	walGather.xDlOpen = walDlOpen;
	walGather.xDlError = walDlError;
	walGather.xDlSym = walDlSym;
	walGather.xDlClose = walDlClose;
	walGather.xRandomness = walRandomness;
	walGather.xSleep = walSleep;
	walGather.xCurrentTime = walCurrentTime;
	walGather.xGetLastError = walGetLastError;
	walGather.xCurrentTimeInt64 = walCurrentTimeInt64;
	return sqlite3_vfs_register(&walGather, 0);
}

// walVfsName copies into out the name of the VFS the connection's main
// database was opened with (for tests).
static void walVfsName(void *db, char *out, int n) {
	char *name = 0;
	out[0] = 0;
	// 12 is SQLITE_FCNTL_VFSNAME.
	if (sqlite3_file_control(db, "main", 12, &name) == 0 && name) {
		strncpy(out, name, n - 1);
		out[n - 1] = 0;
		sqlite3_free(name);
	}
}
*/
import "C"

import (
	"database/sql"
	"sync"
)

// gatherVFS is the SQLite VFS the store's connections open the database
// with: the unix VFS, but for the writes to the write-ahead log.
//
// SQLite writes each page of a commit to the log in two writes, the
// frame's header and the page: a fact's write changes some twenty pages,
// so its commit made some 44 pwrite calls of 24 and 1,024 bytes, each
// paying the file system's per-call work (ext4 dirties and commits a
// buffer each time), a fifth of the write's time in the store. The
// gathering VFS keeps the log's writes in memory while they follow one
// another and writes them in one call at the commit frame's page, the
// transaction's last, whose error is then the commit's to return.
//
// SQLite makes a commit visible to other connections and processes
// through the log index (the -shm file), never the log alone: readers
// and checkpointers read only the frames the index's header counts, and
// the header is published after a memory barrier (xShmBarrier), by the
// writer holding the log's write lock. So that no connection ever finds
// a frame the index counts missing from the file, every byte a
// connection's log gathered is written before any barrier of that
// connection and before any lock of the index it takes or gives up, and
// before the log is read, synced, truncated, sized or closed. The log is
// the connection's own (sqlite3_database_file_object pairs it with its
// database file), and nothing writes another connection's bytes, whose
// error would be lost. After a commit frame, until the next lock or
// barrier, writes go straight to the file (SQLite may write frame
// headers again, their checksums, and pad the log), so that their
// errors are the commit's. Bytes that fail to be written are dropped,
// never written later out of order, and the transaction they were for
// fails; a failure at a lock or a barrier, which cannot be returned
// there, is returned by the log's next call. A process killed with bytes
// gathered loses only a commit that never returned, which SQLite's
// recovery of the log ignores.
const gatherVFS = "memory-mcp-gather"

var gatherOnce struct {
	sync.Once
	ok bool
}

// vfsParam is the DSN parameter that opens connections with the
// gathering VFS, or nothing when it could not be registered.
func vfsParam() string {
	gatherOnce.Do(func() {
		gatherOnce.ok = C.walRegister(C.CString(gatherVFS)) == 0
	})
	if !gatherOnce.ok {
		return ""
	}
	return "&vfs=" + gatherVFS
}

// connVFS returns the name of the VFS conn's database was opened with.
func connVFS(conn *sql.Conn) (string, error) {
	var name string
	err := conn.Raw(func(dc any) error {
		db, err := sqliteHandle(dc)
		if err != nil {
			return err
		}
		var buf [128]C.char
		C.walVfsName(db, &buf[0], C.int(len(buf)))
		name = C.GoString(&buf[0])
		return nil
	})
	return name, err
}
