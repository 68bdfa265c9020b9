// A C++ fixture for the CFI reader's tests: exceptions (LSDA and personality augmentations), virtual
// calls, templates and std::sort, built with g++ -O2 and default flags.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct Shape {
  virtual ~Shape() = default;
  virtual double area() const = 0;
};

struct Square : Shape {
  explicit Square(double side) : side(side) {}
  double area() const override {
    if (side < 0) throw std::invalid_argument("negative side " + std::to_string(side));
    return side * side;
  }
  double side;
};

__attribute__((noinline)) double total(const std::vector<std::unique_ptr<Shape>> &shapes) {
  double sum = 0;
  for (const auto &shape : shapes) {
    try {
      sum += shape->area();
    } catch (const std::exception &error) {
      std::puts(error.what());
    }
  }
  return sum;
}

int main(int argc, char **) {
  std::vector<std::unique_ptr<Shape>> shapes;
  for (int i = -2; i < argc * 5; i++) shapes.push_back(std::make_unique<Square>(i));
  std::vector<double> areas;
  for (const auto &shape : shapes) {
    try {
      areas.push_back(shape->area());
    } catch (...) {
    }
  }
  std::sort(areas.begin(), areas.end(), [](double x, double y) { return x > y; });
  std::printf("%f %zu\n", total(shapes), areas.size());
  return 0;
}
