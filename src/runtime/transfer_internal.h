// The transfers as the runtime schedules them internally, under the scheduling mutex.
#pragma once

#include <string>

#include "runtime/device_array.h"
#include "runtime/scheduler.h"

namespace kiln::runtime {

// Zeros → `array`, on `stream` (an array with no host copy, or whose host copy is zeros).
Result<StreamPoint> zero_locked(Stream& stream, DeviceArray& array, const std::string& label);
// The host copy → `array`, on `stream` (a fill where the host copy is zeros nobody wrote). Snapshots the host bytes, unless a device action still
// uses the host copy (then the upload reads it when it runs, after that action).
Result<StreamPoint> upload_locked(Stream& stream, DeviceArray& array);
// `array` → the host copy, on the array's home stream; records the host copy as pending.
Result<StreamPoint> download_locked(DeviceArray& array);

// Whether `point` has been reached (a failed stream counts as reached: nothing more will come).
bool point_passed(const StreamPoint& point);

}  // namespace kiln::runtime
