// The transfers as the runtime schedules them internally, under the scheduling mutex.
#pragma once

#include "runtime/device_array.h"
#include "runtime/scheduler.h"

namespace kiln::runtime {

// The host copy → `array`, on `stream`. Snapshots the host bytes, unless a device action still
// uses the host copy (then the upload reads it when it runs, after that action).
Result<StreamPoint> upload_locked(Stream& stream, DeviceArray& array);
// `array` → the host copy, on the array's home stream; records the host copy as pending.
Result<StreamPoint> download_locked(DeviceArray& array);

// Whether `point` has been reached (a failed stream counts as reached: nothing more will come).
bool point_passed(const StreamPoint& point);

}  // namespace kiln::runtime
