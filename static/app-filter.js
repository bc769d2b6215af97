// The policy form's filter box over the allowed applications' checkboxes: hides those
// whose slug and name do not contain what is typed (a hidden checkbox is still sent if
// checked). Without this script the box stays hidden and every checkbox shows.
(function () {
  'use strict';

  function setUp(box) {
    var list = document.getElementById(box.getAttribute('data-filter-for'));
    var status = document.getElementById(box.id + '-status');
    if (!list) { return; }
    var items = Array.prototype.slice.call(list.querySelectorAll('li'));
    box.closest('.filter').hidden = false;
    box.addEventListener('input', function () {
      var wanted = box.value.trim().toLowerCase();
      var shown = 0;
      items.forEach(function (item) {
        var match = item.getAttribute('data-search').indexOf(wanted) >= 0;
        item.hidden = !match;
        if (match) { shown += 1; }
      });
      if (status) {
        status.textContent = wanted ? shown + ' of ' + items.length + ' applications shown' : '';
      }
    });
  }

  document.querySelectorAll('input[data-filter-for]').forEach(setUp);
})();
