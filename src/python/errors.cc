#include "python/errors.h"

namespace kiln::python {

void throw_if_error(const Status& status) {
  if (!status.ok()) throw Error(status.to_string());
}

}  // namespace kiln::python
