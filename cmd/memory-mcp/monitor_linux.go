package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// keepMonitorAwake starts the stdio server again with the runtime's
// monitor kept from its deep sleep (see monitorSetting), in the same
// process: the same id, the same standard streams, nothing read from them
// yet. In the server started so, it puts back the GODEBUG it was given,
// for the processes it starts. It returns only when the server runs on as
// it is: started so already, the setting chosen by GODEBUG, or the exec
// refused (said on stderr).
func keepMonitorAwake() {
	cur, set := os.LookupEnv("GODEBUG")
	next, again := monitorEnv(cur, set)
	if !again {
		if strings.HasSuffix(cur, monitorSetting) {
			if given, ok := givenEnv(cur); ok {
				os.Setenv("GODEBUG", given)
			} else {
				os.Unsetenv("GODEBUG")
			}
		}
		return
	}
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GODEBUG="+next)
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintln(os.Stderr, "memory-mcp: could not start again with the runtime's monitor kept awake; serving as it is:", err)
}
