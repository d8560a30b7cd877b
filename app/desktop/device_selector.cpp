#include "app/desktop/device_selector.h"

#include <QStandardItemModel>

#include "engine/cuda/device_query.h"
#include "engine/model/model.h"

namespace cl {
namespace {

void disable(QComboBox* box, int index, const std::string& why) {
    if (auto* items = qobject_cast<QStandardItemModel*>(box->model()))
        items->item(index)->setEnabled(false);
    box->setItemData(index, QString::fromStdString(why), Qt::ToolTipRole);
}

}  // namespace

QComboBox* make_device_selector() {
    auto* box = new QComboBox();
    box->setObjectName("device");
    box->addItem("cpu", "cpu");
    // LibTorch must have CUDA (Debian's has not) and the runtime must see the devices.
    const std::string torch_reason = cuda_unavailable_reason();
    const auto list = cuda::list_devices();
    if (list.devices.empty()) {
        box->addItem("cuda", "cuda");
        if (!torch_reason.empty())
            disable(box, 1, torch_reason);
        else if (!cuda::kernels_built())  // LibTorch sees a GPU; only the names are missing
            box->setItemData(1, "the default CUDA device (this build lists no names: no toolkit)",
                             Qt::ToolTipRole);
        else
            disable(box, 1, list.why_none);
        return box;
    }
    for (const auto& d : list.devices) {
        box->addItem(QString::fromStdString(d.label()),
                     QString::fromStdString("cuda:" + std::to_string(d.index)));
        if (!torch_reason.empty()) disable(box, box->count() - 1, torch_reason);
    }
    return box;
}

std::string selected_device(const QComboBox& selector) {
    return selector.currentData().toString().toStdString();
}

}  // namespace cl
