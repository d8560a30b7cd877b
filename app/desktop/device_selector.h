// The Device selector of the run controls: the CPU, then every CUDA device by name and memory.
#pragma once

#include <QComboBox>

namespace cl {

// Item text: "cpu" or "cuda:N  <name> (<total> GiB, <free> free)"; item data: the device string
// LoadOptions::device takes ("cpu", "cuda:N"). Choices that this build or machine cannot use stay
// listed but disabled, with the reason as their tooltip.
QComboBox* make_device_selector();

// The device string of the current choice.
std::string selected_device(const QComboBox& selector);

}  // namespace cl
