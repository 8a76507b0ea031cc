/*
 * csi.c - Secrets Store CSI volumes (issue 29, docs/csi-secrets.md): which
 * csi volumes the sidecar mirrors. A volume of the driver
 * secrets-store.csi.k8s.io holds what a SecretProviderClass fetched from
 * an external store (Vault, a cloud key store); with the driver's rotation
 * on, the driver rewrites it in place through its AtomicWriter (vendored
 * from the kubelet's, the order before kubernetes#97642), so the sidecar
 * mounts the app's own volume read-only, as it mounts a ConfigMap's: one
 * NodePublishVolume per pod, the same files for both containers, and no
 * second fetch from the store. Volumes of other CSI drivers are left
 * alone: nothing says they change in a way a watcher should follow.
 */
#include "inject/transform_int.h"

#include <string.h>

int inject__is_csi_secrets(const cJSON *vol)
{
    const cJSON *csi = cJSON_GetObjectItemCaseSensitive(vol, "csi");
    if (!cJSON_IsObject(csi)) return 0;
    const cJSON *driver = cJSON_GetObjectItemCaseSensitive(csi, "driver");
    return cJSON_IsString(driver) && strcmp(driver->valuestring, INJECT_CSI_SECRETS_DRIVER) == 0;
}
