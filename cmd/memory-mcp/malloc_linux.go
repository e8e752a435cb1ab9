//go:build linux && cgo

package main

/*
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int one_malloc_arena(void) {
#if defined(__GLIBC__) && defined(M_ARENA_MAX)
	return mallopt(M_ARENA_MAX, 1);
#else
	return 0;
#endif
}

// malloc_arenas counts glibc's arenas from malloc_info's report, -1 where
// there is none.
static int malloc_arenas(void) {
#if defined(__GLIBC__)
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) return -1;
	int ok = malloc_info(0, f) == 0;
	fclose(f);
	int n = 0;
	for (char *p = buf; ok && (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return ok ? n : -1;
#else
	return -1;
#endif
}
*/
import "C"

// oneMallocArena has the C allocator, which SQLite allocates through,
// keep one arena for the whole process, unless the MALLOC_ARENA_MAX
// variable says otherwise, and reports whether it did. glibc gives each
// thread that allocates while another holds the lock an arena of its own,
// up to eight per core; the Go runtime runs C calls on whichever thread
// is free, so a stdio server's SQLite memory ended up spread over seven
// arenas, each keeping its own free pages: 3.6 MB resident where one
// arena holds 2.9. With one processor (oneProcessor) there is next to no
// lock to contend for. It must run before SQLite allocates; the threads
// the runtime starts before main allocate nothing through malloc.
func oneMallocArena(getenv func(string) string) bool {
	if getenv("MALLOC_ARENA_MAX") != "" {
		return false
	}
	return C.one_malloc_arena() == 1
}

// mallocArenas is how many arenas the C allocator has, -1 if it cannot
// tell.
func mallocArenas() int { return int(C.malloc_arenas()) }
