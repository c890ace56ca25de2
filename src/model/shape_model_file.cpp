// Shape models as files (include/kvtrim/shape_model.h).
#include <chrono>

#include "model/shape_models.h"

namespace kvtrim {

std::string ModelShapeNames() {
  std::string r;
  for (const model::ModelShape& s : model::ModelShapes()) r += (r.empty() ? "" : ", ") + std::string(s.name);
  return r;
}

Expected<ShapeModelWritten> WriteShapeModel(const ShapeModelOptions& o, const std::string& path,
                                            const std::function<void(uint64_t, uint64_t)>& progress) {
  auto w = model::BuildShapeModel(o);
  if (!w.ok()) return w.error();
  const auto t0 = std::chrono::steady_clock::now();
  KVTRIM_RETURN_IF_ERROR(w->WriteFile(path, progress));
  ShapeModelWritten r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.tensors = w->n_tensors();
  r.bytes = w->file_bytes();
  return r;
}

}  // namespace kvtrim
