// Test workload in C++ (built with g++ -O2, default flags: no frame pointers): templates, a lambda
// through std::sort, virtual calls. Usage: cpp_workload SECONDS
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "clock.h"

namespace workload {
struct Shape {
  virtual ~Shape() = default;
  virtual double area(int rounds) const = 0;
};
struct Square : Shape {
  double side;
  explicit Square(double s) : side(s) {}
  double area(int rounds) const override
  {
    double a = side;
    for (int i = 0; i < rounds; i++)
      a = a * 1.0000001 + 0.5;
    return a;
  }
};

template <typename T> __attribute__((noinline)) double sorted_sum(std::vector<T> &values)
{
  std::sort(values.begin(), values.end(), [](const T &l, const T &r) { return l % 1000 < r % 1000; });
  double sum = 0;
  for (const T &v : values)
    sum += v;
  return sum;
}
} // namespace workload

volatile double sink;

int main(int argc, char **argv)
{
  double seconds = argc > 1 ? std::atof(argv[1]) : 5;
  double end = cpu_seconds() + seconds;
  std::vector<std::unique_ptr<workload::Shape>> shapes;
  for (int i = 0; i < 8; i++)
    shapes.push_back(std::make_unique<workload::Square>(i));
  std::vector<uint64_t> values(20000);
  while (cpu_seconds() < end) {
    for (size_t i = 0; i < values.size(); i++)
      values[i] = (i * 2654435761u) ^ static_cast<uint64_t>(sink);
    sink = workload::sorted_sum(values);
    for (auto &shape : shapes)
      sink = sink + shape->area(20000);
  }
  report_cpu_seconds();
  return 0;
}
