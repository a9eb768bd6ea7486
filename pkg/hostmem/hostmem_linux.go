package hostmem

import "os"

// Total is the machine's memory in bytes (MemTotal), 0 when unknown.
func Total() int64 { return fromMeminfo("MemTotal") }

// Available is the memory available to new programs in bytes (MemAvailable), 0 when unknown.
func Available() int64 { return fromMeminfo("MemAvailable") }

func fromMeminfo(field string) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	return meminfoField(f, field)
}
