//go:build !race

package weave

// raceEnabled scales slow tests down under the race detector, which makes
// tokenizing about ten times slower.
const raceEnabled = false
