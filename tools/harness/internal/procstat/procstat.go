// Package procstat reads what Linux says of a process's CPU and memory
// (/proc/PID/stat, /proc/PID/status), the measure of the companion's idle
// cost in bench-sync.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Stat is the CPU fields of /proc/PID/stat, in clock ticks.
type Stat struct{ Utime, Stime, Cutime, Cstime int64 }

// ClockTicks is USER_HZ of Linux on the machines this runs on.
const ClockTicks = 100

// Self is the CPU time of the process itself, s.
func (p Stat) Self() float64 { return float64(p.Utime+p.Stime) / ClockTicks }

// Children is the CPU time of the children it waited for, s.
func (p Stat) Children() float64 { return float64(p.Cutime+p.Cstime) / ClockTicks }

// Total is every tick of both.
func (p Stat) Total() int64 { return p.Utime + p.Stime + p.Cutime + p.Cstime }

// Read is the Stat of process pid.
func Read(pid int) (Stat, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	return Parse(data)
}

// Parse reads utime, stime, cutime and cstime (fields 14 to 17)
// from the contents of /proc/PID/stat; the command name, field 2, is in
// parentheses and may hold spaces and parentheses.
func Parse(data []byte) (Stat, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return Stat{}, fmt.Errorf("/proc stat %q: no command name", data)
	}
	// After the name: field 3 (state) is the first.
	fields := strings.Fields(string(data[end+1:]))
	if len(fields) < 15 {
		return Stat{}, fmt.Errorf("/proc stat %q: %d fields after the name", data, len(fields))
	}
	var v [4]int64
	for i := range v {
		if _, err := fmt.Sscan(fields[11+i], &v[i]); err != nil {
			return Stat{}, fmt.Errorf("/proc stat field %d %q: %w", 14+i, fields[11+i], err)
		}
	}
	return Stat{Utime: v[0], Stime: v[1], Cutime: v[2], Cstime: v[3]}, nil
}

// ParseVmHWM is the peak resident set size, KiB, from /proc/PID/status.
func ParseVmHWM(status []byte) (int64, error) {
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kib int64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kib); err != nil {
				return 0, fmt.Errorf("VmHWM %q: %w", rest, err)
			}
			return kib, nil
		}
	}
	return 0, errors.New("no VmHWM line in /proc status")
}
