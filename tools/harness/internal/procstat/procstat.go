// Package procstat reads what Linux says of a process's CPU and memory
// (/proc/PID/stat, /proc/PID/status), the measure of the companion's idle
// cost in bench-sync, and of the whole machine's CPU (/proc/stat).
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

// Machine is the CPU time of every core of the machine since boot, from
// the first line of /proc/stat, in clock ticks: Busy (user, nice, system,
// irq, softirq, steal; guest time is in user) and Total (Busy, idle and
// iowait).
type Machine struct{ Busy, Total int64 }

// ReadMachine is the machine's CPU time now.
func ReadMachine() (Machine, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Machine{}, err
	}
	return ParseMachine(data)
}

// ParseMachine reads the line "cpu  user nice system idle iowait irq
// softirq steal ..." of /proc/stat.
func ParseMachine(data []byte) (Machine, error) {
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return Machine{}, fmt.Errorf("/proc/stat: the first line %q is not the machine's cpu line", line)
	}
	var v [8]int64
	for i := range v {
		if _, err := fmt.Sscan(fields[1+i], &v[i]); err != nil {
			return Machine{}, fmt.Errorf("/proc/stat cpu field %d %q: %w", i+1, fields[1+i], err)
		}
	}
	busy := v[0] + v[1] + v[2] + v[5] + v[6] + v[7]
	return Machine{Busy: busy, Total: busy + v[3] + v[4]}, nil
}

// BusyShare is the share of all cores busy from m to later, 0 to 1.
func (m Machine) BusyShare(later Machine) float64 {
	total := later.Total - m.Total
	if total <= 0 {
		return 0
	}
	return float64(later.Busy-m.Busy) / float64(total)
}
