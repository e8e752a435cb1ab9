//go:build cgo

package memory

/*
#include <pthread.h>
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

#define WAL_OK 0
#define WAL_OPEN_WAL 0x00080000
#define WAL_FRAME_HEADER 24
// Gathered bytes past this are written at once: a transaction that large
// (an import) gains nothing more from gathering, and the unix VFS writes
// at most 128 KiB a call (it masks a larger size, and takes the short
// write for a full disk).
#define WAL_GATHER_MAX (1 << 16)

// walFile is a file of the gathering VFS: the unix VFS's own file follows
// it in the same allocation.
typedef struct walFile {
	walSqliteFile base;
	walSqliteFile *real;
	int log;          // the write-ahead log: its writes are gathered
	int commitHeader; // the last write was a commit frame's header
	unsigned char *buf;
	int n, cap;       // buf holds the bytes for [off, off+n)
	walI64 off;
	struct walFile *next; // the process's open logs
} walFile;

static walVfs *walReal;
static walVfs walGather;
static pthread_mutex_t walMu = PTHREAD_MUTEX_INITIALIZER;
static walFile *walLogs;  // every open log, under walMu
static int walPending;     // bytes gathered and not written, any log

// walFlushLocked writes p's gathered bytes. They go either way: bytes
// that failed to be written must never reach the file later, after other
// writes (the transaction they were for fails with this error).
static int walFlushLocked(walFile *p) {
	if (p->n == 0) return WAL_OK;
	int rc = p->real->pMethods->xWrite(p->real, p->buf, p->n, p->off);
	__atomic_sub_fetch(&walPending, p->n, __ATOMIC_RELAXED);
	p->n = 0;
	return rc;
}

static int walFlush(walFile *p) {
	if (!p->log) return WAL_OK;
	pthread_mutex_lock(&walMu);
	int rc = walFlushLocked(p);
	pthread_mutex_unlock(&walMu);
	return rc;
}

// walFlushAll writes every log's gathered bytes, before a lock on the log
// index changes or its header is published (see walShmLock).
static void walFlushAll(void) {
	if (__atomic_load_n(&walPending, __ATOMIC_RELAXED) == 0) return;
	pthread_mutex_lock(&walMu);
	for (walFile *p = walLogs; p; p = p->next) walFlushLocked(p);
	pthread_mutex_unlock(&walMu);
}

static int walGatherWrite(walFile *p, const void *z, int amt, walI64 off) {
	int rc = WAL_OK;
	pthread_mutex_lock(&walMu);
	if (p->n > 0 && off == p->off + p->n && p->n + amt <= WAL_GATHER_MAX) {
		// appended: the common case
	} else if (p->n > 0 && off >= p->off && off + amt <= p->off + p->n) {
		// a frame of this transaction written again
		memcpy(p->buf + (off - p->off), z, amt);
		goto done;
	} else {
		rc = walFlushLocked(p);
		if (rc != WAL_OK) goto out;
		if (amt > WAL_GATHER_MAX) {
			rc = p->real->pMethods->xWrite(p->real, z, amt, off);
			goto out;
		}
		p->off = off;
	}
	if (p->n + amt > p->cap) {
		int cap = p->cap ? p->cap : 32768;
		while (cap < p->n + amt) cap *= 2;
		unsigned char *b = realloc(p->buf, cap);
		if (!b) {
			// Written as SQLite asked, after what came before.
			rc = walFlushLocked(p);
			if (rc == WAL_OK) rc = p->real->pMethods->xWrite(p->real, z, amt, off);
			goto out;
		}
		p->buf = b;
		p->cap = cap;
	}
	memcpy(p->buf + p->n, z, amt);
	p->n += amt;
	__atomic_add_fetch(&walPending, amt, __ATOMIC_RELAXED);
done:
	// A commit frame's header carries the database's size after the
	// commit (bytes 4-7, zero in every other frame); its page is the
	// transaction's last write. Written then, an error is the commit's
	// to return, before SQLite publishes the frames.
	if (p->commitHeader) {
		p->commitHeader = 0;
		rc = walFlushLocked(p);
	} else if (amt == WAL_FRAME_HEADER) {
		const unsigned char *h = z;
		p->commitHeader = (h[4] | h[5] | h[6] | h[7]) != 0;
	}
out:
	pthread_mutex_unlock(&walMu);
	return rc;
}

static int walClose(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	int rc = WAL_OK;
	if (p->log) {
		pthread_mutex_lock(&walMu);
		rc = walFlushLocked(p);
		for (walFile **q = &walLogs; *q; q = &(*q)->next) {
			if (*q == p) {
				*q = p->next;
				break;
			}
		}
		pthread_mutex_unlock(&walMu);
		free(p->buf);
		p->buf = 0;
	}
	int rc2 = p->real->pMethods->xClose(p->real);
	return rc != WAL_OK ? rc : rc2;
}

static int walRead(walSqliteFile *f, void *z, int amt, walI64 off) {
	walFile *p = (walFile *)f;
	int rc = walFlush(p);
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
	int rc = walFlush(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xTruncate(p->real, size);
}

static int walSync(walSqliteFile *f, int flags) {
	walFile *p = (walFile *)f;
	int rc = walFlush(p);
	if (rc != WAL_OK) return rc;
	return p->real->pMethods->xSync(p->real, flags);
}

static int walFileSize(walSqliteFile *f, walI64 *size) {
	walFile *p = (walFile *)f;
	int rc = walFlush(p);
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
	int rc = walFlush(p);
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
// every gathered byte is in the log, where the next reader or writer
// looks for it.
static int walShmLock(walSqliteFile *f, int offset, int n, int flags) {
	walFile *p = (walFile *)f;
	walFlushAll();
	return p->real->pMethods->xShmLock(p->real, offset, n, flags);
}

static void walShmBarrier(walSqliteFile *f) {
	walFile *p = (walFile *)f;
	walFlushAll();
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
	p->log = (flags & WAL_OPEN_WAL) != 0;
	if (p->log) {
		pthread_mutex_lock(&walMu);
		p->next = walLogs;
		walLogs = p;
		pthread_mutex_unlock(&walMu);
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
// a frame the index counts missing from the file, every gathered byte
// of the process is written before any barrier and before any lock of
// the index is taken or given up, and before the log is read, synced,
// truncated, sized or closed. Bytes that fail to be written are dropped,
// never written later out of order, and the transaction they were for
// fails. A process killed with bytes gathered loses only a commit that
// never returned, which SQLite's recovery of the log ignores.
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
