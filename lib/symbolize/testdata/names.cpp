// Test fixture for demangling: C++ functions in a namespace, a class, templates, overloads, an operator
// and a lambda, so the binary holds a realistic mix of mangled names.
#include <cstdio>
#include <string>
#include <vector>

namespace omni {
namespace test {

template <typename T>
struct Box {
  T value;
  __attribute__((noinline)) T get() const { return value; }
};

class Widget {
 public:
  __attribute__((noinline)) int spin(int n, const std::string &label);
  __attribute__((noinline)) bool operator<(const Widget &other) const { return weight < other.weight; }
  int weight = 1;
};

int Widget::spin(int n, const std::string &label) {
  int acc = 0;
  for (int i = 0; i < n; i++) acc += static_cast<int>(label.size()) * weight + i;
  return acc;
}

}  // namespace test
}  // namespace omni

__attribute__((noinline)) int overloaded(int x) { return x + 1; }
__attribute__((noinline)) int overloaded(double x, std::vector<int> &v) {
  v.push_back(static_cast<int>(x));
  return static_cast<int>(v.size());
}

int main(int argc, char **) {
  omni::test::Box<int> a{argc};
  omni::test::Box<double> b{argc * 0.5};
  omni::test::Widget w, v;
  std::vector<int> values;
  auto twice = [&](int x) __attribute__((noinline)) { return overloaded(x) + overloaded(b.get(), values); };
  std::printf("%d %d %d\n", a.get(), w.spin(argc, "label"), twice(argc) + (w < v));
  return 0;
}
